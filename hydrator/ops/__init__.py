"""What an operator uses around a run: the effective configuration, log lines, the state tools.

secrets.py       which values are secrets, and how they are masked wherever they are shown
config_show.py   `hydrator config show`: every option's effective value and where it came from
logs.py          `--log-format text|json`, with every secret value taken out of every line
state_tools.py   `hydrator state inspect|stats`: an embedded engine's stores, opened read-only
"""
