"""A fake Android device that speaks the adb wire protocol over TCP: a stand-in for ReDroid's adbd.

It exists because ReDroid cannot run on every machine (it needs binder and an image). Unchanged adb clients
talk to it: the real ``adb`` server (``adb connect host:port``) or any Python adb client. What it speaks:

- the 24-byte message header (command, arg0, arg1, data length, data checksum, magic = command ^ 0xffffffff)
  with byte-sum checksums, the CNXN handshake (no AUTH: like ReDroid with ``ro.adb.secure=0``; the banner
  carries ro.product.* properties and no features, so clients use the legacy ``shell:`` service), OPEN /
  OKAY / WRTE / CLSE streams with one-write-in-flight flow control, several streams at once;
- the services ``shell:<command>`` and ``exec:<command>`` (binary-safe output, no exit status: legacy shell).

The shell understands what the Android backend runs: ``getprop`` (``sys.boot_completed`` turns 1 only after
a boot delay, or never), ``input tap|swipe|text|keyevent|draganddrop``, ``uiautomator dump``, ``cat``,
``screencap -p``, ``am start|force-stop``, ``pm clear|list packages``, ``wm size|density``, ``echo``, ``rm``,
joined with ``;``, ``&&`` or ``||`` and redirected with ``>``. Inputs change a small fake UI (a launcher with a
counter button, a text field and a scrollable list; a browser screen for VIEW intents; a plain screen for any
other activity) whose state lives under the device's /data (so ``pm clear`` and a fresh /data reset it);
``screencap`` renders that UI as a real PNG, ``uiautomator dump`` as uiautomator's XML. Every ``input``
command is appended to /data/local/tmp/maigym_input.log.

Run as a module (stdlib only, relative imports, so a container can run it with the host's Python)::

    python -m fake_android androidboot.redroid_width=720 androidboot.redroid_height=1280 ...

(from the folder that holds this package; ``python -m maigym_ray.testing.fake_android`` on a host.) Its
modules: :mod:`.wire` (the message format), :mod:`.shell_line` (command lines), :mod:`.device` (the device,
its UI and its shell) and :mod:`.adbd` (the server and the stand-in's entry point).

Environment: ``MAIGYM_ADB_PORT`` (default 5555), ``FAKE_ADB_HOST`` (default 127.0.0.1), ``FAKE_BOOT_DELAY_S``
(seconds until boot completes, or ``never``; default 1), ``FAKE_DATA_DIR`` (default /data).
See :mod:`maigym_ray.testing.standin` for the stand-in container image that runs it.
"""
