"""A gpurr trace writer written from trace_format/FORMAT.md and trace.capnp alone.

It shares no code with gpurr: the buffer hash (FORMAT.md section 8), the
directory, block and index layout, and the simulated training program that
the tests record are all implemented here, from the specification; so is
the reader (reader.py) that plant_real.py uses to rewrite real recordings,
and the loop both scripts run their checks in (runner.py).
"""
