package org.kvcache;

/** Library-wide facts: versions, features, status names, native loading. */
public final class KvCache {
  /**
   * System property naming libkvcache_jni.so (a file, or the folder that
   * holds it). When it is not set, {@code System.loadLibrary("kvcache_jni")}
   * searches java.library.path.
   */
  public static final String LIBRARY_PATH_PROPERTY = "org.kvcache.library.path";

  /** Feature bit: the library was built with the CUDA backend. */
  public static final long FEATURE_CUDA_COMPILED = 1L;
  /** Feature bit: the CUDA backend is built and a CUDA device is usable now. */
  public static final long FEATURE_CUDA_DEVICE = 2L;
  /**
   * Feature bit: the library was built with hiredis, so a remote tier can be
   * configured ({@link Config#setRemoteCache}).
   */
  public static final long FEATURE_REDIS = 4L;

  private KvCache() {}

  /**
   * Loads the JNI library now (every class does it on first use).
   * @throws UnsatisfiedLinkError saying what was tried, when it cannot be loaded.
   */
  public static void loadLibrary() {
    NativeLibrary.load();
  }

  /** Version of the running library, MAJOR * 10000 + MINOR * 100 + PATCH. */
  public static int version() {
    NativeLibrary.load();
    return (int) KvcNative.kvc_version();
  }

  /** Version of the running library, "MAJOR.MINOR.PATCH". */
  public static String versionString() {
    NativeLibrary.load();
    return KvcNative.kvc_version_string();
  }

  /** Version of the headers this binding was generated from. */
  public static String headerVersionString() {
    NativeLibrary.load();
    return KvcNativeConstants.KVC_VERSION_STRING;
  }

  /** ABI major of the running library (the N of libkvcache.so.N). */
  public static int abiVersion() {
    NativeLibrary.load();
    return (int) KvcNative.kvc_abi_version();
  }

  /**
   * Feature bits ({@link #FEATURE_CUDA_COMPILED}, {@link #FEATURE_CUDA_DEVICE},
   * {@link #FEATURE_REDIS}).
   */
  public static long features() {
    NativeLibrary.load();
    return KvcNative.kvc_features();
  }

  /** Static name of a status ("KVC_ERR_NOT_FOUND"); "KVC_ERR_UNKNOWN" if unknown. */
  public static String statusString(int status) {
    NativeLibrary.load();
    return KvcNative.kvc_status_string(status);
  }
}
