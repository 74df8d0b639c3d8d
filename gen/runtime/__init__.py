"""The host runtime: prompt in, tokens out, over interchangeable engines (``specgen generate``).

* :mod:`gen.runtime.runtime`: :class:`~gen.runtime.runtime.Runtime`, the one API
  (``load_model``, ``load_draft``, ``generate``), and its engines (golden now; the
  RTL engine plugs in when the on-chip decoder exists);
* :mod:`gen.runtime.model`: models by name or file, checked on the way in;
* :mod:`gen.runtime.image`: a model's BSFP planes, parameters, states and I/O
  buffers laid out at the addresses of :class:`golden.memory_map.MemoryMap`;
* :mod:`gen.runtime.regbus`: the register access of the board back-end
  (:class:`~gen.runtime.regbus.RegisterBus`, ``mmap`` of ``/dev/mem`` or UIO,
  named registers from :func:`hw.regmap.accelerator_regmap`), untested on hardware;
* :mod:`gen.runtime.cli`: ``specgen generate``.

``docs/runtime.md`` is the user's page.
"""
