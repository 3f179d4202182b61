LEVEL = "model directory"
