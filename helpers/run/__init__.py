"""The run folder: typed records of every artifact a step writes, and the versioned run summary."""
