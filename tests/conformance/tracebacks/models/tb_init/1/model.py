def fail(what):
    raise RuntimeError(f"{what} boom")  # LINE:fail


class TritonPythonModel:
    def initialize(self, args):
        fail("initialize")  # LINE:initialize

    def execute(self, requests):
        return []
