"""Desktop environments: a guest agent inside the desktop, and providers that bring desktops up (Xvfb, libvirt)."""
