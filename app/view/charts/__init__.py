"""Server-rendered SVG charts: the scaling lab's, the Learn panel's, the class's predictions."""
