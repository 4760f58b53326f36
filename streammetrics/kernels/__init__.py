"""Pure formulas on arrays and histograms: ranking, binning, classification metrics."""
