"""spark_etl"""
