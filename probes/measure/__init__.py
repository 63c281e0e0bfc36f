"""Per-request samples and the statistics computed over them."""
