"""The prediction and label event schema (contract sections 2 and 5): decoding message values
(``decoding``), the field rules (``fields``), the parsed records and rejection codes
(``records``) and the parser that applies them (``parser``). Monitors take these events;
the stream layer windows them over event time."""
