"""Protocol adapters: send one request to an endpoint and measure it."""
