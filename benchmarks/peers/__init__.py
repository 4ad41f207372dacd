"""attnmt next to other toolkits (OpenNMT-py), trained on the same data and shape."""
