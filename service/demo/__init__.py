"""`sustain demo`'s parts below the command: its two simulators, each a process of its own on
ports remembered in the data directory (simulators.py), and the objects it seeds so its first
screen shows what sustain is for, with the banner that introduces them (objects.py)."""
