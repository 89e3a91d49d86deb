"""pytest plugin: llama.cpp's server test suite (tools/server/tests of the
llama.cpp that llama-cpp-python vendors) against a given server binary,
offline.  Loaded by run.py with `-p lst_plugin`; what it changes:

  * the hub models the tests name are replaced by local GGUF files
    (MODEL_MAP below); a test whose model has no local stand-in is
    skipped with that reason, never run against a model of another kind;
  * the server binary is LST_SERVER; with LST_FLAVOR=hetero, llama-server's
    command line is translated to hetero-server's (translate_args below);
  * the port is a free one (not 8080, which another server may hold);
  * each server gets --threads LST_THREADS (default 1), the same for both;
  * the `wget` and `filelock` modules the suite imports are stood in for
    when they are not installed (nothing is downloaded; one worker).

Nothing of llama.cpp's suite is copied: it is imported from LST_TESTS."""
import os
import socket
import sys
import types

import pytest

TESTS = os.environ["LST_TESTS"]
SERVER = os.environ["LST_SERVER"]
FLAVOR = os.environ.get("LST_FLAVOR", "llama")
SMOLLM2 = os.environ["LST_SMOLLM2"]
QWEN = os.environ.get("LST_QWEN", "")
THREADS = int(os.environ.get("LST_THREADS", "1"))
LOG_DIR = os.environ.get("LST_LOG_DIR") or os.path.join(os.environ.get("TMPDIR", "/tmp"), f"lst-{os.getpid()}")
os.makedirs(LOG_DIR, exist_ok=True)

# Which hub model each local file stands for: (substring of the test's
# --hf-repo/--hf-file, local file or None = skip, why).
MODEL_MAP = [
    ("stories260K-infill", None, "infill model (FIM tokens): no local stand-in"),
    ("stories15M_MOE", None, "MoE test model: no local stand-in"),
    ("tinyllamas/split", None, "split-GGUF loading: no local split model"),
    ("stories260K", SMOLLM2, ""),
    ("tinyllama", SMOLLM2, ""),
    ("stories", SMOLLM2, ""),
    ("bert-bge", None, "embedding model: no local stand-in"),
    ("jina-reranker", None, "reranking model: no local stand-in"),
    ("tinygemma3", None, "vision model: no local stand-in"),
    ("Qwen", QWEN or None, "LST_QWEN not set"),
]


def local_model(repo, file):
    name = f"{repo or ''}/{file or ''}"
    for key, path, why in MODEL_MAP:
        if key in name:
            return path, why
    return None, f"hub model {name}: no local stand-in"


# llama-server flags -> hetero-server's.  hetero-server takes llama-server's
# own spellings (and refuses, with a message, the ones it has no meaning
# for), so the translation only renames what hetero spells differently.
RENAME = {}


def translate_args(args):
    out = []
    for a in args:
        out.append(RENAME.get(a, a))
    return out


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def stub_modules():
    try:
        import wget  # noqa: F401
    except ImportError:
        m = types.ModuleType("wget")

        def download(url, out=None):
            raise RuntimeError(f"offline: cannot download {url}")
        m.download = download
        sys.modules["wget"] = m
    try:
        import filelock  # noqa: F401
    except ImportError:
        m = types.ModuleType("filelock")

        class FileLock:  # one worker: nothing to serialize
            def __init__(self, path):
                self.path = path

            def __enter__(self):
                return self

            def __exit__(self, *a):
                return False
        m.FileLock = FileLock
        sys.modules["filelock"] = m


# before llama.cpp's conftest imports them
stub_modules()


def pytest_configure(config):
    os.environ.setdefault("PORT", str(free_port()))
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    import subprocess
    import utils

    # the models are local: nothing to pre-download
    utils.ServerPreset.load_all = staticmethod(lambda: None)
    original_start = utils.ServerProcess.start

    def start(self, *a, **kw):
        if self.model_hf_repo or self.model_hf_file or self.model_url:
            path, why = local_model(self.model_hf_repo or self.model_url, self.model_hf_file)
            if not path:
                pytest.skip(why)
            self.model_file, self.model_hf_repo, self.model_hf_file, self.model_url = path, None, None, None
        self.server_path = SERVER
        # one thread each unless the test says: on a loaded machine two
        # spinning threads run llama-server at a fraction of one's speed
        if self.n_threads is None:
            self.n_threads = THREADS
        # the server's output to a file, so that a server that refuses to
        # start says why in the test's failure
        if not self.log_path:
            self.log_path = os.path.join(LOG_DIR, f"server-{os.getpid()}-{id(self)}.log")
        try:
            return original_start(self, *a, **kw)
        except RuntimeError as e:
            self._log.close()
            with open(self.log_path, errors="replace") as f:
                tail = [line.strip() for line in f.read().splitlines() if line.strip()][-2:]
            raise RuntimeError(f"{e}: {' / '.join(tail)}") from None

    utils.ServerProcess.start = start
    if FLAVOR == "hetero":
        real_popen = subprocess.Popen

        def popen(args, *a, **kw):
            args = [str(x) for x in args]
            if args and args[0] == SERVER:
                args = [args[0]] + translate_args(args[1:])
            return real_popen(args, *a, **kw)
        utils.subprocess = types.SimpleNamespace(**{k: getattr(subprocess, k) for k in dir(subprocess)
                                                    if not k.startswith("__")})
        utils.subprocess.Popen = popen
