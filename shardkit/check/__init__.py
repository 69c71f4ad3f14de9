"""Looking inside TFRecord files and proving them whole: ``inspect``, ``verify`` and their text reports."""
