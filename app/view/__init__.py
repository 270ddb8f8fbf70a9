"""The view layer: from a run to what the templates show (panels per stage, typeset maths, SVG charts)."""
