# moved to eval/serve/fake_server.py; the lead drops this shim
from eval.serve.fake_server import *  # noqa: F403
