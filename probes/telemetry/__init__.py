"""A server's own metrics read beside a run: the series worth reading by server
family (families.py), the scraper process (scraper.py) and the parent's side (watch.py). Beside
load/; summaries of the series are measure/server_metrics.py.
"""
