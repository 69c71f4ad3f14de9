"""Input formats, one module each: what a build can read, and how.

``input_format`` is the interface every format implements and the values it yields (``Row``,
``Piece``); ``text_lines`` is what the line-based text formats share. Which format reads which
input is decided by the one table in ``pipeline.inputs.registry``: a new format is a module here
and a line there.
"""
