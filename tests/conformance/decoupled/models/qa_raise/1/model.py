class TritonPythonModel:
    def execute(self, requests):
        for _ in requests:
            raise Exception("Intentional Error")
        return None
