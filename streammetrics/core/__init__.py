"""Protocol, declared state, input checks, exceptions: what every layer above builds on."""
