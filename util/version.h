/* util/version.h — normbench's version, shown by --version and written into reports. */
#ifndef NB_UTIL_VERSION_H
#define NB_UTIL_VERSION_H

#define NB_VERSION "0.1.0"

#endif
