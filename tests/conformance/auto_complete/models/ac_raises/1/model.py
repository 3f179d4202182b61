class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        raise RuntimeError("auto-complete exploded")  # LINE:raise

    def execute(self, requests):
        return []
