"""Load profiles (pure schedules) and the drivers that execute them."""
