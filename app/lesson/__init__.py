"""The lesson layer: the content as data (presets, stage texts, training goals). Imports only the maths layer."""
