"""The tests compare runs with each other and with the CLI's: they use the
committed default machine profile whatever CPU they run on (without it,
mmsim picks the profile measured on this machine's CPU model, and times
would differ between machines)."""

import os

os.environ.setdefault("MMSIM_PROFILE", "default")
