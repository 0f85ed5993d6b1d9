#include "real.h"
