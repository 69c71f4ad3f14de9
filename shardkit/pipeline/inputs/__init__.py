"""Phase 1, inputs: index files and folders -> rows grouped by split -> typed entries.

``index_files`` finds index files, ``registry`` says which format reads each input (one module
per format in ``formats/``), ``splits`` groups their rows by split and fingerprints them,
``sources`` is how the plan keeps each input, and ``entries`` types each row's values against
the config.
"""
