/* mepgen fallback for clang's resource header, used only when no compiler's own is found. */
#pragma once
