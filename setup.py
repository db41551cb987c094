"""Builds the nanovllm._core extension with the project's CMake build (target _core only) and
installs it with the pure-Python package from python/nanovllm.

    python3 -m venv --system-site-packages .venv && .venv/bin/pip install --no-build-isolation .

Environment: CMAKE_ARGS (extra configure flags, e.g. "-DNANOVLLM_CUDA=OFF"),
NANOVLLM_PIP_BUILD_DIR (CMake build folder; default build-pip/ in the checkout, kept between
installs so rebuilds are incremental), CMAKE_BUILD_PARALLEL_LEVEL (compile jobs).
"""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("NANOVLLM_PIP_BUILD_DIR", os.path.join(ROOT, "build-pip"))
        cfg = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
               f"-DPython_EXECUTABLE={sys.executable}", "-DNANOVLLM_PYTHON=ON"]
        if shutil.which("ninja") and not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            cfg += ["-G", "Ninja"]  # a new build folder (an existing one keeps its generator)
        if shutil.which("ccache"):
            cfg += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache",
                    "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
        cfg += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        subprocess.run(cfg, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", build_dir, "--target", "_core", "-j", jobs], check=True)
        built = os.path.join(build_dir, "python", "nanovllm")
        so = [f for f in os.listdir(built) if f.startswith("_core.") and f.endswith(".so")]
        if len(so) != 1:
            raise RuntimeError(f"expected one _core*.so in {built}, found {so}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(built, so[0]), dest)


setup(ext_modules=[CMakeExtension("nanovllm._core")], cmdclass={"build_ext": CMakeBuild})
