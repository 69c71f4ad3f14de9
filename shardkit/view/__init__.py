"""Seeing data: contact sheets of augmentations before a build, of records after it, of label balance."""
