"""What every side shares about files: atomic writes, where things live in an output folder, and
reading an output's manifest (structure-checked) or the TFRecord files a path names."""
