"""Map the top-level folders under the single import root `wmsuite` (see DESIGN.md, Layout)."""

from setuptools import find_packages, setup

PARTS = ["envs", "policies", "world_models", "cuda_ops", "eval_harness", "assets"]

package_dir = {"wmsuite": "wmsuite"}
packages = ["wmsuite", *(f"wmsuite.{p}" for p in find_packages("wmsuite"))]
for part in PARTS:
    package_dir[f"wmsuite.{part}"] = part
    packages.append(f"wmsuite.{part}")
    packages += [f"wmsuite.{part}.{sub}" for sub in find_packages(part)]

setup(package_dir=package_dir, packages=packages)
