"""What every side shares about files: local paths and URLs, their stores, atomic writes and publishing."""
