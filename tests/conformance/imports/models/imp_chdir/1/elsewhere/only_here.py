VALUE = "found in the new working directory"
