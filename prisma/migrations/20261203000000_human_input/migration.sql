-- AlterTable
ALTER TABLE "Execution" ADD COLUMN     "humanInputToken" TEXT;

-- AlterTable
ALTER TABLE "Review" ADD COLUMN     "resumeTaskId" TEXT;

