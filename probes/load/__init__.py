"""Load: profiles (what a run sends, as inputs), their plans and schedules (pure), the
drivers that execute a stage (open and closed loop, sessions), the capacity search's next
level, and senders.py, the one dispatch from a target's API kind to the function that sends
and measures a request. Above workload/, client/ and measure/.
"""
