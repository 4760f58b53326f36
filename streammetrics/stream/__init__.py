"""Events, windows and the I/O-free pipeline that replay, the service and Spark drive."""
