class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("mc_broken refuses to start")

    def execute(self, requests):
        return None
