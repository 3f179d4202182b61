class TritonPythonModel:
    def initialize(self, args):
        self.ready = True
