from hydrator.spark_app import SCRIPT

print(SCRIPT)
