"""Phase 1, inputs: index files and folders -> rows grouped by split -> typed entries.

``index_files`` finds and reads index files, ``image_folders`` walks ImageFolder trees,
``splits`` groups their rows by split and fingerprints them, ``entries`` types each row's
values against the config.
"""
