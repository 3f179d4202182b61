# Never imported: a model of a python-based backend runs the backend's model.py, not one in
# its model directory.
raise RuntimeError("the model directory's model.py was imported instead of the runtime's")
