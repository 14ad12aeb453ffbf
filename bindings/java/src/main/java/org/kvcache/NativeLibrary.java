package org.kvcache;

import java.io.File;

/**
 * Loads libkvcache_jni.so (which needs libkvcache.so.0) once per class loader.
 *
 * <p>Order: the system property {@value KvCache#LIBRARY_PATH_PROPERTY} (the
 * path of libkvcache_jni.so, or a folder holding it) when it is set, else
 * {@code System.loadLibrary("kvcache_jni")} (java.library.path). A failure is
 * remembered: every later use throws the same {@link UnsatisfiedLinkError},
 * whose message says what was tried.
 */
final class NativeLibrary {
  static final String LIBRARY_NAME = "kvcache_jni";

  private static volatile boolean loaded;
  private static String failure;

  private NativeLibrary() {}

  static void load() {
    if (!loaded) {
      loadOnce();
    }
  }

  private static synchronized void loadOnce() {
    if (loaded) {
      return;
    }
    if (failure != null) {
      throw new UnsatisfiedLinkError(failure);
    }
    String property = System.getProperty(KvCache.LIBRARY_PATH_PROPERTY);
    try {
      if (property != null && !property.isEmpty()) {
        File file = new File(property);
        if (file.isDirectory()) {
          file = new File(file, System.mapLibraryName(LIBRARY_NAME));
        }
        if (!file.isFile()) {
          throw new UnsatisfiedLinkError("no such file: " + file.getAbsolutePath());
        }
        System.load(file.getAbsolutePath());
      } else {
        System.loadLibrary(LIBRARY_NAME);
      }
      loaded = true;
    } catch (UnsatisfiedLinkError e) {
      String tried = property != null && !property.isEmpty()
          ? "-D" + KvCache.LIBRARY_PATH_PROPERTY + "=" + property
          : "System.loadLibrary(\"" + LIBRARY_NAME + "\") with java.library.path="
              + System.getProperty("java.library.path");
      failure = "kvcache: cannot load the JNI library " + System.mapLibraryName(LIBRARY_NAME)
          + " (tried " + tried + "): " + e.getMessage()
          + ". Set -D" + KvCache.LIBRARY_PATH_PROPERTY
          + "=/path/to/" + System.mapLibraryName(LIBRARY_NAME)
          + " or add its folder to java.library.path; libkvcache.so.0 must be"
          + " found by the dynamic linker too.";
      UnsatisfiedLinkError error = new UnsatisfiedLinkError(failure);
      error.initCause(e);
      throw error;
    }
  }
}
