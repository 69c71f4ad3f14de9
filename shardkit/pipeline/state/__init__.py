"""What keeps OUT consistent across runs: the build state and resume, the locks, the manifest,
the report of a stopped build and the checks made before any work starts.
"""
