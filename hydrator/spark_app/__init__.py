"""The file to give `spark-submit`: `hydrator` as a Spark application.

    spark-submit --master spark://host:7077 [Spark options] \\
        "$(python -m hydrator.spark_app)" run --engine spark [hydrator options]

`python -m hydrator.spark_app` prints the path of `main.py` beside this file. It lives in a
directory of its own because Python puts a script's directory first on `sys.path`: next to the
package's modules, `config.py` or `kafka/` would shadow any library of the same name.
"""

from pathlib import Path

SCRIPT = Path(__file__).with_name("main.py")
