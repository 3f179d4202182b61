import sys


class TritonPythonModel:
    def initialize(self, args):
        sys.exit(2)  # LINE:initialize

    def execute(self, requests):
        return []
