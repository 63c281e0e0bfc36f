"""The status page at `/`: server-rendered HTML with inline SVG charts, no JavaScript."""
