"""The state layer: what a student has in front of them (the scenario, reading the form, permalinks, pins, quiz)."""
